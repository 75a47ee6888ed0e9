"""``ab``: a user's own script under the stock comm and under asynciocomm, in
ABBA pairs, with the comm switched from outside and proven in every process."""
