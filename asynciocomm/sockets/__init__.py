"""The socket set-up that Tornado does for the stock comm: listening sockets
(``binding``), the TLS listener's accept loop (``accepting``), happy eyeballs
(``eyeballs``), keepalive and timeouts (``sockopts``), TLS arguments and bounds
(``tlsargs``). Depends on the standard library and asynciocomm's settings only.
"""
