"""One module per CMSIS-NN kernel family; each registers its adapters with `registry.adapter`."""
