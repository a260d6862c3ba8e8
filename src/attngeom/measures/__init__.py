"""The statistics of the attention maps (`stats`), their one table with the arrays they share (`table`),
and every number a verification computes (`results`)."""
