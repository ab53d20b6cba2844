"""Other formats a problem or a version comes in or goes out as (GPU MODE reference-kernels, ...)."""
