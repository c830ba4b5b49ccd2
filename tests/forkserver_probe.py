"""A child for tests/test_forkserver.py: prints what it was started with (and, given `complain`, a line to stderr),
then exits with the code it was given, or waits to be killed. It also says whether the API's app was already
imported when it started, as the fork server imports it for the checkout's children."""

import json
import os
import sys
import time

if __name__ == "__main__":
    started_with = {"argv": sys.argv[1:], "cwd": os.getcwd(), "probe": os.environ.get("PROBE"), "name": __name__}
    print(json.dumps({**started_with, "app_imported": "api.app" in sys.modules}))
    sys.stdout.flush()
    if "complain" in sys.argv:
        print("a complaint", file=sys.stderr)
    if sys.argv[1] == "wait":
        time.sleep(600)  # the test kills it
    sys.exit(int(sys.argv[1]))
