"""Executors of IR graphs: float (numpy, for passes, calibration and bias correction) and int8 (the
bit-exact CMSIS-NN reference kernels)."""
