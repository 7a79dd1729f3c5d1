package delayed

// Version is this module's version, the Python package's (setup.cfg) in semver's spelling:
// "2.0.0.dev0" there is "2.0.0-dev0" here; the module's tags are go/v<Version>.
// tests/test_go_module.py fails when the two differ.
const Version = "2.0.0-dev0"
