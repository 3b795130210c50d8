"""Priority policies: one module per scheduler family. Each turns the pool's Active jobs into a
Ranking (or, for optimisation policies, Shares)."""
