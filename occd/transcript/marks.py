"""Markers occd writes into transcripts, read by more than one part of occd (one source for each)."""

SEED_MARK = "[occd] This session continues session"  # how an occd seed message begins (both eras)
