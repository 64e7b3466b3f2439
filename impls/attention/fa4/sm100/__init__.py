"""FA4-style attention forward for Blackwell (sm_100a) in CuTe DSL; see README.md."""
