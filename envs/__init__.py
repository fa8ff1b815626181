"""Named environment definitions (`EnvSpec`s): thin and declarative; `memora_rl.env.registry` makes them."""
