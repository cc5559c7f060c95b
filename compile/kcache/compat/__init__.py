"""What makes kcache's compiled modules look like torch.compile's to the
tools around them (Accelerate, PEFT, Trainer): plain state-dict keys."""
