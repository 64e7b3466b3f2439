raise RuntimeError("this module is broken on import")
