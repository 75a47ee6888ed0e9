"""``reliability``: the long runs of the reliability suite (hostile input, idle
connections, connect/close cycles, the integrity soak) and the connection,
peer and process helpers the reliability tests share."""
