"""Statistics of IFVs: what each costs to compute and how much the model relies on it."""
