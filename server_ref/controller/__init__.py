"""The controller: the metadata state machine over the Raft log (``server_ref.raft``).

``records.py`` the record kinds, ``image.py`` the metadata image every node replays,
``election.py`` leader election and ISR rules, ``controller.py`` the quorum controller
(registration, heartbeats, fencing, writes), ``apis.py`` its Kafka APIs.
"""
