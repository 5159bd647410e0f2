"""The demo app over saved CoVe models (`app`, also the Space's app.py as it is) and the Space folder around it
(`space`). The command lines are `cove-demo` (`training/commands/demo.py`) and `cove-push-to-hub --space`."""
