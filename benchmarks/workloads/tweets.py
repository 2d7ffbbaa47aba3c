"""Tweets: is a tweet offensive or hateful? Word and char TF-IDF plus hand-made counts, logistic regression.

Written the way a data scientist outside the project writes it (issue 28): two vectorizers on the
raw tweet, counts of mentions, exclamation marks and hashtags from ``.map(lambda ...)``, the length
from ``.str.len()``, stacked with ``np.column_stack`` and concatenated with ``scipy.sparse.hstack``
(the raw counts unscaled), ``LogisticRegression``. Data: Davidson et al. 2017
(``hate_speech_davidson/labeled_data.csv``); the label is ``class != 2``.
"""

import numpy as np
import pandas as pd
import scipy.sparse
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression

from benchmarks.data import require
from benchmarks.workloads.common import FeatureCapture, Workload, cap_rows, fit_workload, split

TASK = "classification"
DESCRIPTION = (
    "Binary classification of tweets (hate speech or offensive vs. neither): word 1-2-gram and "
    "char 2-4-gram TF-IDF plus raw @/!/# counts (.map(lambda)) and length (.str.len()), "
    "scipy.sparse.hstack, logistic regression; returns the probability of the offensive class."
)


def build(rows: int | None = None, random_state: int = 0) -> Workload:
    tweets = cap_rows(pd.read_csv(require("hate_speech_davidson/labeled_data.csv")), rows, random_state)
    data = split(tweets[["tweet"]], tweets["class"] != 2, random_state)

    word_tfidf = TfidfVectorizer(ngram_range=(1, 2), min_df=2, max_features=10000)
    char_tfidf = TfidfVectorizer(analyzer="char", ngram_range=(2, 4), min_df=3, max_features=20000)
    word_tfidf.fit(data.train_inputs["tweet"])
    char_tfidf.fit(data.train_inputs["tweet"])

    def predict(df):
        words = word_tfidf.transform(df["tweet"])
        chars = char_tfidf.transform(df["tweet"])
        mentions = df["tweet"].map(lambda t: t.count("@"))
        bangs = df["tweet"].map(lambda t: t.count("!"))
        hashtags = df["tweet"].map(lambda t: t.count("#"))
        length = df["tweet"].str.len()
        counts = np.column_stack([mentions, bangs, hashtags, length])
        X = scipy.sparse.hstack([words, chars, counts]).tocsr()
        return model.predict_proba(X)[:, 1]

    model = FeatureCapture()  # fit_workload() puts the fitted model here
    return fit_workload("tweets", predict, LogisticRegression(solver="liblinear"), data, TASK, DESCRIPTION)
