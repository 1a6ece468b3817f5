"""The judge: exact values of MOO positions, for the post-match review and the assistant.

One engine (:mod:`bots.judge.values`) gives both the value of a position and an optimal guess
there, so the practice assistant's suggestion is by construction a guess the review rates
best (loss 0). :mod:`bots.judge.opening` holds the shipped table that makes the first guesses
of 4-of-10 MOO free; :mod:`bots.judge.review` judges a match's guesses.
"""
