"""Pretrained models written with weft.nn (weft.models.bert: BERT sentence encoders)."""
