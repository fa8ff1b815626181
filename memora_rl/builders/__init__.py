"""Memory-graph builders: Memora and NEMORI (through an LLM) and the LLM-free extractive one."""
