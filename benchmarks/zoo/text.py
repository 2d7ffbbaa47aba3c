"""Text pipelines as scikit-learn's documentation and tutorials write them.

Spellings followed: "Working With Text Data" (``Pipeline([("vect", CountVectorizer()), ("tfidf",
TfidfTransformer()), ("clf", MultinomialNB())])`` and the ``SGDClassifier`` variant),
"Classification of text documents using sparse features" (``TfidfVectorizer(sublinear_tf=True,
max_df=0.5, min_df=5, stop_words="english")`` + ``RidgeClassifier``), "Concatenating multiple
feature extraction methods" (``FeatureUnion``) and "Column Transformer with Heterogeneous Data
Sources" (``ColumnTransformer`` of a vectorizer on a text column and encoders on the others), and
the notebook habit of a helper ``X = featurize(df)`` with ``str.len()`` / ``str.count("!")`` counts.

Data: Davidson tweets (binary: ``class != 2``; three classes: ``class``), the SMS spam collection
and BBC News articles (five categories, about 2,300 characters each). The tweets' ``kind`` column
(retweet, reply or tweet, from the text's ``RT @`` and leading ``@``) is derived while loading, as
a notebook's data preparation would; ``count`` is the data set's number of annotators.
"""

import csv

import numpy as np
import pandas as pd
import scipy.sparse
from sklearn.compose import ColumnTransformer
from sklearn.feature_extraction.text import CountVectorizer, TfidfTransformer, TfidfVectorizer
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression, RidgeClassifier, SGDClassifier
from sklearn.naive_bayes import MultinomialNB
from sklearn.pipeline import FeatureUnion, Pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from benchmarks.data import require
from benchmarks.workloads.common import cap_rows, split
from benchmarks.zoo.common import Entry, FittedModels


def _tweets(rows, random_state) -> pd.DataFrame:
    tweets = cap_rows(pd.read_csv(require("hate_speech_davidson/labeled_data.csv")), rows, random_state)
    kind = np.where(tweets["tweet"].str.contains("RT @", regex=False), "retweet",
                    np.where(tweets["tweet"].str.startswith("@"), "reply", "tweet"))
    return tweets.assign(kind=kind).reset_index(drop=True)


def _sms(rows, random_state) -> pd.DataFrame:
    messages = pd.read_csv(require("sms_spam/SMSSpamCollection"), sep="\t", header=None,
                           names=["label", "message"], quoting=csv.QUOTE_NONE)
    return cap_rows(messages, rows, random_state).reset_index(drop=True)


def _bbc(rows, random_state) -> pd.DataFrame:
    return cap_rows(pd.read_csv(require("bbc_news/bbc-text.csv")), rows, random_state).reset_index(drop=True)


def tweets_pipeline(data, fitted) -> Entry:
    """The two-step Pipeline every text tutorial starts with, called on the text column."""
    pipe = fitted("tweets_pipeline", lambda: Pipeline([
        ("tfidf", TfidfVectorizer(sublinear_tf=True, min_df=2)),
        ("clf", LogisticRegression(max_iter=1000)),
    ]).fit(data.train_inputs["tweet"], data.y_train))

    def predict(df):
        return pipe.predict_proba(df["tweet"])[:, 1]

    def by_hand(df):
        X = pipe[0].transform(df["tweet"])
        return pipe[-1].predict_proba(X)[:, 1]

    return Entry("tweets_pipeline", "tweets", "linear", "binary",
                 "Pipeline(TfidfVectorizer, LogisticRegression).predict_proba(df['tweet'])[:, 1]",
                 predict, data, by_hand)


def tweets_union_3class(data, fitted) -> Entry:
    """A FeatureUnion of word and char_wb TF-IDF in a Pipeline, three classes."""
    pipe = fitted("tweets_union_3class", lambda: Pipeline([
        ("features", FeatureUnion([
            ("words", TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True)),
            ("chars", TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4), min_df=2, sublinear_tf=True)),
        ])),
        ("clf", LogisticRegression(max_iter=1000)),
    ]).fit(data.train_inputs["tweet"], data.y_train))
    words, chars = (transformer for _, transformer in pipe[0].transformer_list)

    def predict(df):
        return pipe.predict_proba(df["tweet"])

    def by_hand(df):
        X = scipy.sparse.hstack([words.transform(df["tweet"]), chars.transform(df["tweet"])]).tocsr()
        return pipe[-1].predict_proba(X)

    return Entry("tweets_union_3class", "tweets", "linear", "multiclass",
                 "Pipeline(FeatureUnion(word, char_wb TF-IDF), LogisticRegression).predict_proba: 3 classes",
                 predict, data, by_hand)


def tweets_column_transformer(data, fitted) -> Entry:
    """TF-IDF on the text, a one-hot category and a scaled number in one ColumnTransformer."""
    numbers = Pipeline([("imputer", SimpleImputer(strategy="median")), ("scaler", StandardScaler())])
    preprocessor = ColumnTransformer([
        ("text", TfidfVectorizer(sublinear_tf=True, min_df=2), "tweet"),
        ("kind", OneHotEncoder(handle_unknown="ignore"), ["kind"]),
        ("num", numbers, ["count"]),
    ])
    pipe = fitted("tweets_column_transformer", lambda: Pipeline([
        ("preprocessor", preprocessor), ("classifier", LogisticRegression(max_iter=1000)),
    ]).fit(data.train_inputs, data.y_train))
    text, kind, num = (pipe[0].named_transformers_[name] for name in ("text", "kind", "num"))

    def predict(df):
        return pipe.predict_proba(df)

    def by_hand(df):
        counts = num[-1].transform(num[0].transform(df[["count"]]))
        X = scipy.sparse.hstack([text.transform(df["tweet"]), kind.transform(df[["kind"]]), counts]).tocsr()
        return pipe[-1].predict_proba(X)

    return Entry("tweets_column_transformer", "tweets", "linear", "multiclass",
                 "Pipeline(ColumnTransformer(TF-IDF text, OneHotEncoder kind, imputed+scaled count), "
                 "LogisticRegression).predict_proba(df): 3 classes",
                 predict, data, by_hand)


def tweets_helper_counts(data, fitted) -> Entry:
    """A helper of the user's builds the matrix: TF-IDF plus length and ``!``/``@`` counts."""
    tfidf = fitted("tweets_helper_tfidf", lambda: TfidfVectorizer(min_df=2).fit(data.train_inputs["tweet"]))

    def featurize(df):
        words = tfidf.transform(df["tweet"])
        length = df["tweet"].str.len()
        exclamations = df["tweet"].str.count("!")
        mentions = df["tweet"].str.count("@")
        counts = np.column_stack([np.log1p(length), exclamations, mentions])
        return scipy.sparse.hstack([words, counts]).tocsr()

    model = fitted("tweets_helper_model",
                   lambda: LogisticRegression(max_iter=2000).fit(featurize(data.train_inputs), data.y_train))

    def predict(df):
        X = featurize(df)
        return model.predict_proba(X)[:, 1]

    return Entry("tweets_helper_counts", "tweets", "linear", "binary",
                 "X = featurize(df): TF-IDF + str.len() + str.count('!'/'@'), hstack; LogisticRegression",
                 predict, data)


def sms_naive_bayes(data, fitted) -> Entry:
    """"Working With Text Data": counts, TF-IDF weights, multinomial naive Bayes."""
    text_clf = fitted("sms_naive_bayes", lambda: Pipeline([
        ("vect", CountVectorizer()), ("tfidf", TfidfTransformer()), ("clf", MultinomialNB()),
    ]).fit(data.train_inputs["message"], data.y_train))

    def predict(df):
        return text_clf.predict_proba(df["message"])[:, 1]

    return Entry("sms_naive_bayes", "sms", "naive-bayes", "binary",
                 "Pipeline(CountVectorizer, TfidfTransformer, MultinomialNB).predict_proba(...)[:, 1]",
                 predict, data)


def sms_sgd_labels(data, fitted) -> Entry:
    """The tutorial's linear SVM by SGD, answering labels ("ham"/"spam")."""
    text_clf = fitted("sms_sgd_labels", lambda: Pipeline([
        ("vect", CountVectorizer()), ("tfidf", TfidfTransformer()),
        ("clf", SGDClassifier(loss="hinge", penalty="l2", alpha=1e-3, random_state=42, max_iter=5, tol=None)),
    ]).fit(data.train_inputs["message"], data.y_train))

    def predict(df):
        return text_clf.predict(df["message"])

    return Entry("sms_sgd_labels", "sms", "linear", "binary",
                 "Pipeline(CountVectorizer, TfidfTransformer, SGDClassifier(hinge)).predict: string labels",
                 predict, data)


def bbc_by_hand(data, fitted) -> Entry:
    """Long documents through word and char_wb TF-IDF and logistic regression, written out by hand."""
    word_tfidf = fitted("bbc_word_tfidf", lambda: TfidfVectorizer(
        sublinear_tf=True, min_df=2, stop_words="english").fit(data.train_inputs["text"]))
    char_tfidf = fitted("bbc_char_tfidf", lambda: TfidfVectorizer(
        analyzer="char_wb", ngram_range=(2, 4), min_df=2, max_features=50000, sublinear_tf=True,
    ).fit(data.train_inputs["text"]))

    def predict(df):
        words = word_tfidf.transform(df["text"])
        chars = char_tfidf.transform(df["text"])
        X = scipy.sparse.hstack([words, chars]).tocsr()
        return model.predict_proba(X)

    train_text = data.train_inputs["text"]
    model = fitted("bbc_by_hand_model", lambda: LogisticRegression(max_iter=1000).fit(
        scipy.sparse.hstack([word_tfidf.transform(train_text), char_tfidf.transform(train_text)]).tocsr(), data.y_train))
    return Entry("bbc_by_hand", "bbc", "linear", "multiclass",
                 "word + char_wb TfidfVectorizer, hstack, LogisticRegression.predict_proba, by hand: 5 categories",
                 predict, data)


def bbc_pipeline_ridge(data, fitted) -> Entry:
    """"Classification of text documents using sparse features": TF-IDF and RidgeClassifier, labels."""
    pipe = fitted("bbc_pipeline_ridge", lambda: Pipeline([
        ("vectorizer", TfidfVectorizer(sublinear_tf=True, max_df=0.5, min_df=5, stop_words="english")),
        ("classifier", RidgeClassifier(tol=1e-2, solver="sparse_cg")),
    ]).fit(data.train_inputs["text"], data.y_train))

    def predict(df):
        return pipe.predict(df["text"])

    def by_hand(df):
        X = pipe[0].transform(df["text"])
        return pipe[-1].predict(X)

    return Entry("bbc_pipeline_ridge", "bbc", "linear", "multiclass",
                 "Pipeline(TfidfVectorizer(stop_words='english'), RidgeClassifier).predict: 5 category names",
                 predict, data, by_hand)


def build(rows: int | None = None, random_state: int = 0) -> list[Entry]:
    fitted = FittedModels(__file__, rows, random_state)
    tweets = _tweets(rows, random_state)
    binary = split(tweets[["tweet"]], (tweets["class"] != 2).astype(int), random_state)
    three = split(tweets[["tweet", "kind", "count"]], tweets["class"], random_state)
    sms = _sms(rows, random_state)
    sms_binary = split(sms[["message"]], (sms["label"] == "spam").astype(int), random_state)
    sms_labels = split(sms[["message"]], sms["label"], random_state)
    bbc = _bbc(rows, random_state)
    articles = split(bbc[["text"]], bbc["category"], random_state)
    return [
        tweets_pipeline(binary, fitted),
        tweets_union_3class(three, fitted),
        tweets_column_transformer(three, fitted),
        tweets_helper_counts(binary, fitted),
        sms_naive_bayes(sms_binary, fitted),
        sms_sgd_labels(sms_labels, fitted),
        bbc_by_hand(articles, fitted),
        bbc_pipeline_ridge(articles, fitted),
    ]
