"""The ``moo`` console command: the application above the server and the clients.

It is the one package that may import every other (``server``, ``clients``, ``bots``,
``moo``); nothing imports it. ``cli.main`` holds the parser and the table of subcommands.
"""
