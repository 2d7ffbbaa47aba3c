"""Choosing the efficient IFVs: the paper's Algorithm 1."""

DEFAULT_GAMMA = 0.25


def select_efficient(costs: list[float], importances: list[float], gamma: float = DEFAULT_GAMMA) -> list[int]:
    """Indices of the efficient IFVs, most cost-effective first.

    IFVs are taken in decreasing importance / cost. The search stops when the
    next one is less cost-effective than ``gamma`` times the set chosen so far
    (its total importance over its total cost); an IFV that would make the set
    cost more than half of all IFVs together is skipped.
    """
    if len(costs) != len(importances):
        raise ValueError("costs and importances must have one entry per IFV")
    floor = 1e-12  # a generator too fast to time still has a cost
    costs = [max(c, floor) for c in costs]
    total = sum(costs)
    order = sorted(range(len(costs)), key=lambda i: importances[i] / costs[i], reverse=True)
    chosen, chosen_cost, chosen_importance = [], 0.0, 0.0
    for i in order:
        effectiveness = importances[i] / costs[i]
        average = chosen_importance / chosen_cost if chosen else 0.0
        if effectiveness < gamma * average:
            break
        if chosen_cost + costs[i] > total / 2:
            continue
        chosen.append(i)
        chosen_cost += costs[i]
        chosen_importance += importances[i]
    return chosen
