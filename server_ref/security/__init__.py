"""The reference broker's security: listeners, TLS, SASL and SCRAM credentials.

``listeners`` reads Kafka's listener configs into one ``ListenerSetup`` per listener (its
protocol, TLS context and SASL settings); ``tls`` builds the server's ``ssl.SSLContext`` from
PEM settings and names an mTLS client as Kafka does; ``sasl`` is the per-connection
authentication state machine (SaslHandshake / SaslAuthenticate, KIP-368 re-authentication);
``plain``, ``scram`` and ``oauth`` are the mechanisms; ``credentials`` keeps the SCRAM
credentials set through AlterUserScramCredentials. Like the rest of ``server_ref``, nothing
here imports ``sdk.net``: the broker shares only codecs with the client.
"""
