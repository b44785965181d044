"""What evalstream prints on a terminal: outside text made safe to print (`text`), the records of
the output topics as lines (`records`), and the live table of the demo and `status`
(`live_table`)."""
