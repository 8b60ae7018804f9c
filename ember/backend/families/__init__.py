"""The backend contract, one abstract class per kernel family; ``ember.backend.base`` joins them."""
