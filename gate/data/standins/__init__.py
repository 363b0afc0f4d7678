"""Offline stand-ins for every GATE task family, built deterministically from the real Fashion-MNIST images
(and scikit-learn's digits): seeded, documented, generated once into the output root and reused after.

:mod:`.canvas` holds what they share: the item images, seeded placement of items on canvases (with their
masks), and the on-disk cache. Each family's stand-in lives in its own module here.
"""
