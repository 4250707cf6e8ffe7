"""What a user asked for and what will run: the run's configuration (config, config_json, config_jax),
the named presets, each platform's defaults, and the one complete plan (resolve). No framework."""
