"""Price: what will a second-hand item sell for? Text and one-hot features, ridge regression.

SYNTHETIC DATA. No real Mercari data is available to this project, so
:func:`generate_listings` makes Mercari-like listings (the columns of the Mercari Price
Suggestion Challenge: ``name``, ``item_condition_id``, ``category_name``, ``brand_name``,
``shipping``, ``item_description``, ``price``) from a fixed random model. Prices follow a
log-linear model of the category, the brand, the condition, who pays shipping and a few
words of the name, times lognormal noise: a pipeline can learn them from exactly the
features the real competition's pipelines use, but nothing measured on this data says
anything about real listings. The model predicts ``log1p(price)``.
"""

import numpy as np
import pandas as pd
import scipy.sparse as sp
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import Ridge
from sklearn.preprocessing import OneHotEncoder

from benchmarks.workloads.common import FeatureCapture, Workload, fit_workload, split

TASK = "regression"
DESCRIPTION = (
    "Regression of the log sale price of second-hand listings, on SYNTHETIC "
    "Mercari-like data (generate_listings): TF-IDF of the name and of the description, "
    "one-hot brand and category, one-hot condition and shipping, concatenated, ridge "
    "regression; returns log1p(price)."
)

DEFAULT_LISTINGS = 50_000  # listings generated when build() is given no row cap

# category -> (log of its typical price, nouns an item of it is called)
_CATEGORIES = {
    "Women/Tops & Blouses/T-Shirts": (2.4, ["tee", "t-shirt", "top", "tank"]),
    "Women/Dresses/Above Knee, Mini": (2.9, ["dress", "mini dress", "sundress"]),
    "Women/Jewelry/Necklaces": (2.7, ["necklace", "pendant", "choker"]),
    "Women/Women's Handbags/Shoulder Bag": (3.6, ["bag", "purse", "tote", "handbag"]),
    "Women/Athletic Apparel/Pants, Tights, Leggings": (2.8, ["leggings", "tights", "yoga pants"]),
    "Women/Shoes/Boots": (3.4, ["boots", "booties", "rain boots"]),
    "Men/Tops/T-shirts": (2.5, ["tee", "shirt", "graphic tee"]),
    "Men/Shoes/Athletic": (3.7, ["sneakers", "running shoes", "trainers"]),
    "Men/Coats & Jackets/Flight/Bomber": (3.8, ["jacket", "bomber", "coat"]),
    "Beauty/Makeup/Lips": (2.3, ["lipstick", "lip gloss", "liquid lipstick"]),
    "Beauty/Makeup/Face": (2.6, ["foundation", "palette", "highlighter", "concealer"]),
    "Beauty/Fragrance/Women": (3.3, ["perfume", "eau de parfum", "body mist"]),
    "Electronics/Cell Phones & Accessories/Cases, Covers & Skins": (2.2, ["case", "phone case", "cover"]),
    "Electronics/Video Games & Consoles/Games": (2.9, ["game", "video game", "cartridge"]),
    "Electronics/Video Games & Consoles/Consoles": (4.9, ["console", "system", "handheld"]),
    "Electronics/Computers & Tablets/iPad/Tablet/eBook Readers": (5.0, ["tablet", "ipad", "e-reader"]),
    "Electronics/Cameras & Photography/Digital Cameras": (4.8, ["camera", "digital camera"]),
    "Kids/Toys/Dolls & Accessories": (2.7, ["doll", "dollhouse", "doll clothes"]),
    "Kids/Girls 2T-5T/Tops & T-Shirts": (2.2, ["shirt", "top", "tee"]),
    "Home/Home Décor/Candles": (2.6, ["candle", "wax melts", "candle set"]),
    "Home/Kitchen & Dining/Coffee & Tea Accessories": (2.9, ["mug", "tumbler", "coffee maker"]),
    "Vintage & Collectibles/Collectibles/Figurine": (3.0, ["figurine", "figure", "statue"]),
    "Vintage & Collectibles/Trading Cards/Sports": (2.8, ["cards", "card lot", "rookie card"]),
    "Sports & Outdoors/Exercise/Fitness accessories": (2.7, ["resistance bands", "yoga mat", "weights"]),
    "Handmade/Accessories/Hair": (2.1, ["scrunchie", "hair bow", "headband"]),
}

# brand -> log price premium; listings without a brand get None (Mercari's missing brand_name)
_BRANDS = {
    "Nike": 0.25, "PINK": 0.05, "Victoria's Secret": 0.0, "LuLaRoe": 0.1, "Apple": 0.9,
    "Nintendo": 0.5, "Sony": 0.6, "Michael Kors": 0.7, "Coach": 0.8, "Louis Vuitton": 1.8,
    "Sephora": 0.15, "Urban Decay": 0.3, "MAC": 0.2, "Too Faced": 0.25, "Forever 21": -0.4,
    "Old Navy": -0.35, "H&M": -0.4, "American Eagle": -0.2, "Adidas": 0.2, "Under Armour": 0.1,
    "Lululemon": 0.6, "Kate Spade": 0.7, "Tiffany & Co.": 1.3, "Pandora": 0.6, "Disney": 0.1,
    "Funko": -0.1, "Pokemon": 0.2, "Samsung": 0.7, "Canon": 0.9, "Bath & Body Works": -0.1,
    "Yankee Candle": 0.0, "Starbucks": 0.2, "Carter's": -0.3, "Gap": -0.25, "Vera Bradley": 0.1,
}
_NO_BRAND_SHARE = 0.4

# word in the name -> log price effect
_NAME_WORDS = {
    "bundle": 0.45, "lot": 0.35, "authentic": 0.35, "NWT": 0.25, "brand new": 0.2, "rare": 0.3,
    "vintage": 0.15, "set": 0.2, "mini": -0.3, "sample": -0.5, "used": -0.2, "": 0.0,
}
_COLORS = ["black", "white", "pink", "blue", "red", "grey", "gold", "silver", "green", "purple", ""]
_CONDITION_EFFECT = {1: 0.25, 2: 0.1, 3: 0.0, 4: -0.25, 5: -0.55}
_CONDITION_SHARE = [0.43, 0.25, 0.29, 0.02, 0.01]
_SHIPPING_EFFECT = -0.15  # the seller pays shipping on cheaper items
_NOISE = 0.35

_CONDITION_PHRASES = {
    1: ["Brand new, never used.", "New with tags.", "Still sealed in the box."],
    2: ["Like new, worn once.", "Excellent condition.", "Used only a few times."],
    3: ["Good used condition.", "Some signs of wear.", "Gently used."],
    4: ["Fair condition, see pictures.", "Has a small stain.", "Well loved."],
    5: ["For parts or repair.", "Damaged, sold as is.", "Heavily used."],
}
_FILLER = [
    "Smoke free home.", "Ships fast!", "Price is firm.", "Open to reasonable offers.",
    "Bundle to save on shipping.", "Comes from a pet free home.", "Check out my other listings!",
    "Fits true to size.", "Perfect gift.", "No trades please.", "Measurements on request.",
]
_NO_DESCRIPTION = "No description yet"


def generate_listings(n: int, random_state: int = 0) -> pd.DataFrame:
    """``n`` synthetic Mercari-like listings with their sale price (see the module docstring).

    ``log(price) = category base + brand premium + condition effect + shipping effect
    + effect of a word in the name + normal noise``; prices are whole dollars from 3 up.
    The same ``(n, random_state)`` always gives the same listings.
    """
    rng = np.random.default_rng(random_state)
    categories = list(_CATEGORIES)
    category = rng.choice(len(categories), size=n)
    brands = list(_BRANDS)
    has_brand = rng.random(n) >= _NO_BRAND_SHARE
    brand = rng.choice(len(brands), size=n)
    condition = rng.choice([1, 2, 3, 4, 5], size=n, p=_CONDITION_SHARE)
    shipping = (rng.random(n) < 0.45).astype(np.int64)
    words = list(_NAME_WORDS)
    word = rng.choice(len(words), size=n)
    color = rng.choice(len(_COLORS), size=n)

    names, descriptions, brand_names, log_price = [], [], [], np.empty(n)
    for i in range(n):
        base, nouns = _CATEGORIES[categories[category[i]]]
        brand_name = brands[brand[i]] if has_brand[i] else None
        noun = nouns[rng.integers(len(nouns))]
        parts = [brand_name or "", words[word[i]], _COLORS[color[i]], noun]
        names.append(" ".join(p for p in parts if p))
        brand_names.append(brand_name)
        if rng.random() < 0.06:
            descriptions.append(_NO_DESCRIPTION)
        else:
            phrases = _CONDITION_PHRASES[condition[i]]
            sentences = [phrases[rng.integers(len(phrases))]]
            sentences += list(rng.choice(_FILLER, size=rng.integers(0, 4), replace=False))
            descriptions.append(" ".join(sentences))
        log_price[i] = (
            base
            + (_BRANDS[brand_name] if brand_name else 0.0)
            + _CONDITION_EFFECT[condition[i]]
            + _SHIPPING_EFFECT * shipping[i]
            + _NAME_WORDS[words[word[i]]]
        )
    price = np.maximum(3.0, np.round(np.exp(log_price + rng.normal(0.0, _NOISE, size=n))))
    return pd.DataFrame(
        {
            "name": names,
            "item_condition_id": condition,
            "category_name": [categories[c] for c in category],
            "brand_name": brand_names,
            "shipping": shipping,
            "item_description": descriptions,
            "price": price,
        }
    )


def build(rows: int | None = None, random_state: int = 0) -> Workload:
    listings = generate_listings(DEFAULT_LISTINGS if rows is None else rows, random_state)
    data = split(listings.drop(columns="price"), np.log1p(listings["price"]), random_state)

    name_vectorizer = TfidfVectorizer(ngram_range=(1, 2), max_features=20000)
    description_vectorizer = TfidfVectorizer(ngram_range=(1, 2), max_features=20000)
    brand_category_encoder = OneHotEncoder(handle_unknown="ignore")
    condition_shipping_encoder = OneHotEncoder(handle_unknown="ignore")
    name_vectorizer.fit(data.train_inputs["name"])
    description_vectorizer.fit(data.train_inputs["item_description"])
    brand_category_encoder.fit(data.train_inputs[["brand_name", "category_name"]])
    condition_shipping_encoder.fit(data.train_inputs[["item_condition_id", "shipping"]])

    def predict(listings):
        names = name_vectorizer.transform(listings["name"])
        descriptions = description_vectorizer.transform(listings["item_description"])
        brand_category = brand_category_encoder.transform(listings[["brand_name", "category_name"]])
        condition_shipping = condition_shipping_encoder.transform(listings[["item_condition_id", "shipping"]])
        X = sp.hstack([names, descriptions, brand_category, condition_shipping], format="csr")
        return model.predict(X)

    model = FeatureCapture()  # fit_workload() puts the fitted model here
    return fit_workload("price", predict, Ridge(alpha=1.0), data, TASK, DESCRIPTION)
