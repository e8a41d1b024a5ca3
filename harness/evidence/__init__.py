"""Evidence: records and what may be read from them. The record format and its files (records,
record.schema.json), which records count (trust), other runners' records joined in (merge),
losses held to a reference stack (agreement), what a record shows and who ran it (summary), and
the bisections' boundaries (lastgood). Built on the catalog; runs nothing."""
