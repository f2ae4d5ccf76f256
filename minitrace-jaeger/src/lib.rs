//! minitrace-jaeger: under construction (see the issues).
