"""Named environment definitions (`EnvSpec`s), imported as `memora_rl_envs`; `memora_rl.env.registry` makes them."""
