"""Product: is a short message spam? Several text featurizers plus hand-made counts, logistic regression.

Data: the UCI SMS Spam Collection (``sms_spam/SMSSpamCollection``); the label is ``spam``.
"""

import csv

import numpy as np
import pandas as pd
import scipy.sparse as sp
from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer
from sklearn.linear_model import LogisticRegression

from benchmarks.data import require
from benchmarks.workloads.common import FeatureCapture, Workload, cap_rows, fit_workload, split

TASK = "classification"
DESCRIPTION = (
    "Binary classification of SMS messages (spam vs. ham): character counts, word "
    "TF-IDF, character TF-IDF and six hand-made statistics (length, digits, uppercase, "
    "symbols, links), concatenated, logistic regression; returns the spam probability."
)


def build(rows: int | None = None, random_state: int = 0) -> Workload:
    sms = pd.read_csv(
        require("sms_spam/SMSSpamCollection"),
        sep="\t",
        header=None,
        names=["label", "message"],
        quoting=csv.QUOTE_NONE,
    )
    sms = cap_rows(sms, rows, random_state)
    data = split(sms[["message"]], (sms["label"] == "spam").astype(int), random_state)

    char_counter = CountVectorizer(analyzer="char", ngram_range=(1, 2), lowercase=False, max_features=5000)
    word_vectorizer = TfidfVectorizer(analyzer="word", ngram_range=(1, 2), min_df=2, max_features=20000)
    char_vectorizer = TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 5), min_df=2, max_features=30000)
    for vectorizer in (char_counter, word_vectorizer, char_vectorizer):
        vectorizer.fit(data.train_inputs["message"])

    def predict(messages):
        text = messages["message"]
        char_counts = char_counter.transform(text)
        word_tfidf = word_vectorizer.transform(text)
        char_tfidf = char_vectorizer.transform(text)
        length = text.str.len()
        digits = text.str.count(r"[0-9]")
        uppercase = text.str.count(r"[A-Z]")
        symbols = text.str.count(r"[£$€!%&]")
        urls = text.str.count(r"(?i)www|http|\.com")
        statistics = pd.DataFrame(
            {
                "log_length": np.log1p(length),
                "log_digits": np.log1p(digits),
                "digit_ratio": digits / (length + 1),
                "uppercase_ratio": uppercase / (length + 1),
                "symbols": symbols,
                "urls": urls,
            }
        )
        X = sp.hstack(
            [char_counts, word_tfidf, char_tfidf, sp.csr_matrix(statistics.to_numpy(dtype=np.float64))],
            format="csr",
        )
        return model.predict_proba(X)[:, 1]

    model = FeatureCapture()  # fit_workload() puts the fitted model here
    return fit_workload("product", predict, LogisticRegression(C=10.0, max_iter=3000), data, TASK, DESCRIPTION)
