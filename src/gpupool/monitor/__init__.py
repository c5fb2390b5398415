"""GPU monitoring: samplers (`nvml_sampler`, `simulated`) and whose a GPU process is
(`attribution`). Their data types are core.monitoring's."""
