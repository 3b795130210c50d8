"""`roundhouse keys DIR NAME...`: make CURVE key pairs for the scheduler, agents and submitters."""

from __future__ import annotations

from roundhouse.agents.security import make_keys


def register(sub) -> None:
    p = sub.add_parser("keys", help="make CURVE keys: the scheduler's, and one pair per agent or submitter")
    p.add_argument("folder", help="the key folder (created if needed)")
    p.add_argument("names", nargs="*", metavar="NAME", help="agents' node names and submitters' names")
    p.set_defaults(handler=keys_command)


def keys_command(args) -> int:
    written = make_keys(args.folder, args.names)
    for path in written:
        print(path)
    if not written:
        print(f"{args.folder}: every key already exists")
    print(
        f"scheduler: roundhouse serve ... --keys {args.folder}\n"
        f"each node NAME needs {args.folder}/scheduler.key and {args.folder}/NAME.key_secret: "
        f"roundhouse agent --name NAME --keys DIR ..."
    )
    return 0
