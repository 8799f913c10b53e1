"""quantcore: the Fixpoint engine - float networks to int8 CMSIS-NN, and the proof that it is right."""

__version__ = "0.1.0"
