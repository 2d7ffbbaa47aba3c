"""Toxic: is a tweet offensive or hateful? Word and character TF-IDF, logistic regression.

Data: Davidson et al. 2017 (``hate_speech_davidson/labeled_data.csv``); the label is
``class != 2`` (hate speech or offensive language, versus neither).
"""

import pandas as pd
import scipy.sparse as sp
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression

from benchmarks.data import require
from benchmarks.workloads.common import FeatureCapture, Workload, cap_rows, fit_workload, split

TASK = "classification"
DESCRIPTION = (
    "Binary classification of tweets (hate speech or offensive vs. neither): "
    "word 1-2-gram and char_wb 2-4-gram TF-IDF, concatenated, logistic regression; "
    "returns the probability of the offensive class."
)


def build(rows: int | None = None, random_state: int = 0) -> Workload:
    tweets = cap_rows(pd.read_csv(require("hate_speech_davidson/labeled_data.csv")), rows, random_state)
    data = split(tweets[["tweet"]], (tweets["class"] != 2).astype(int), random_state)

    word_vectorizer = TfidfVectorizer(
        analyzer="word", ngram_range=(1, 2), min_df=2, max_features=20000, sublinear_tf=True
    )
    char_vectorizer = TfidfVectorizer(
        analyzer="char_wb", ngram_range=(2, 4), min_df=2, max_features=30000, sublinear_tf=True
    )
    train_text = data.train_inputs["tweet"].str.lower()
    word_vectorizer.fit(train_text)
    char_vectorizer.fit(train_text)

    def predict(df):
        text = df["tweet"].str.lower()
        words = word_vectorizer.transform(text)
        chars = char_vectorizer.transform(text)
        X = sp.hstack([words, chars], format="csr")
        return model.predict_proba(X)[:, 1]

    model = FeatureCapture()  # fit_workload() puts the fitted model here
    return fit_workload("toxic", predict, LogisticRegression(C=4.0, max_iter=2000), data, TASK, DESCRIPTION)
