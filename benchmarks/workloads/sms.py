"""SMS: is a text message spam? Word TF-IDF, char_wb TF-IDF and the raw length, a linear SVM's decision function.

Written the way a data scientist outside the project writes it (issue 28): ``TfidfVectorizer`` with
English stop words, ``TfidfVectorizer(analyzer="char_wb")``, the message length as one unscaled
column, ``scipy.sparse.hstack``, ``LinearSVC``, ranked by ``decision_function``. Data: the UCI SMS
Spam Collection (``sms_spam/SMSSpamCollection``); the label is ``spam``.
"""

import csv

import pandas as pd
import scipy.sparse as sp
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.svm import LinearSVC

from benchmarks.data import require
from benchmarks.workloads.common import FeatureCapture, Workload, cap_rows, fit_workload, split

TASK = "classification"
DESCRIPTION = (
    "Binary classification of SMS messages (spam vs. ham): word TF-IDF, char_wb 2-5-gram TF-IDF "
    "and the raw message length, scipy.sparse.hstack, LinearSVC; returns its decision function."
)


def build(rows: int | None = None, random_state: int = 0) -> Workload:
    sms = pd.read_csv(require("sms_spam/SMSSpamCollection"), sep="\t", header=None, names=["label", "text"],
                      quoting=csv.QUOTE_NONE)
    sms = cap_rows(sms, rows, random_state)
    data = split(sms[["text"]], sms["label"] == "spam", random_state)

    tfidf = TfidfVectorizer(stop_words="english", sublinear_tf=True)
    chars = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5), min_df=2)
    tfidf.fit(data.train_inputs["text"])
    chars.fit(data.train_inputs["text"])

    def predict(df):
        words = tfidf.transform(df.text)
        grams = chars.transform(df.text)
        length = df.text.str.len().to_numpy().reshape(-1, 1)
        X = sp.hstack([words, grams, sp.csr_matrix(length)]).tocsr()
        return model.decision_function(X)

    model = FeatureCapture()  # fit_workload() puts the fitted model here
    return fit_workload("sms", predict, LinearSVC(C=0.5, dual=False), data, TASK, DESCRIPTION)
