"""Where generated models run: the processor cores CMSIS-NN is built for and the targets (host, QEMU
boards, real boards) that build, flash and run a model with its test harness."""
