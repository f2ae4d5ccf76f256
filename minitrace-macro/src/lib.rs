//! minitrace-macro: under construction (see the issues).
