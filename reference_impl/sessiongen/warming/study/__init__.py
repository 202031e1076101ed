"""The warming experiment: the offline optimum and lower bound a policy is measured against,
the sharded replay of large traces, the replay's calibration against recorded usage, the
reports, tables and plots behind `sessiongen experiment warming`, and the breakpoint
placement measurement. Nothing at run time imports it: the keeper needs only the policies
and the traces."""
