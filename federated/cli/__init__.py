"""What fedsweep's command lines share: checks of inputs that are not config fields,
exit statuses, and the one-line report of an internal error.  Torch-free."""
