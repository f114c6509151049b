"""The morning scrape: the day's meetings and races from the TAB API into the race database."""
