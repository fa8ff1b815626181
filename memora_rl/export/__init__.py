"""Export trained policies (adapter, optional merged model, tokenizer, model card) and load them back."""
