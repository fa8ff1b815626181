"""What env, judge and policy share: the trajectory record, the observation, its rendering and the action grammar."""
