"""Export trained policies (adapter, optional merged model, tokenizer, model card) as `policy.export_folder`."""
