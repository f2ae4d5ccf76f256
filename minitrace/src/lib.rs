//! minitrace: the core is under construction (see the issues).
