"""The frame and record format shared by clients and servers.

A leaf package: it imports nothing else from tierlog, so a client needs no server code.
"""
