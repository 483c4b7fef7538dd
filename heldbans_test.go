package protect
