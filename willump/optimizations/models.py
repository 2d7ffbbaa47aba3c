"""What fit needs of the user's model besides what serving needs: that it is trained, a fresh copy."""

from sklearn.base import clone
from sklearn.utils.validation import check_is_fitted

from willump.runtime.models import booster_objective


def check_fitted(model) -> None:
    """ValueError when the user's model has not been trained."""
    if booster_objective(model) is not None:
        return
    try:
        check_is_fitted(model)
    except (TypeError, ValueError) as error:
        raise ValueError(f"the model {type(model).__name__} is not fitted: train it before willump's fit ({error})") from None


def train_like(model, X, y, random_state, replacement=None):
    """A new model of the same kind and settings as ``model`` (or ``replacement``), trained on (X, y)."""
    import lightgbm

    if replacement is None and isinstance(model, lightgbm.Booster):
        params = {**model.params, "verbose": -1, "seed": random_state}
        rounds = model.current_iteration() or 100
        return lightgbm.train(params, lightgbm.Dataset(X, y), num_boost_round=rounds)
    fresh = clone(replacement if replacement is not None else model)
    if "random_state" in fresh.get_params():
        fresh.set_params(random_state=random_state)
    return fresh.fit(X, y)


