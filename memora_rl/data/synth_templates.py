"""Word pools and sentence templates of the synthetic conversation generator (all written for memora-rl).

Templates are `str.format` strings with named fields (`{a_role}` is the role with its
article, "an electrician"). A fact template always states the
answer's words literally (e.g. the employer name), so every generated answer is supported
by its evidence turns. Pools are sampled without replacement inside one conversation, so
two facts never share a value by accident.
"""

from __future__ import annotations

FIRST_NAMES = (
    "Alma", "Bruno", "Celia", "Dario", "Edith", "Felix", "Greta", "Hugo", "Ines", "Jonas",
    "Kira", "Lionel", "Mara", "Nikolai", "Odette", "Pavel", "Quinn", "Rosa", "Soren", "Talia",
    "Ulric", "Vera", "Wendell", "Xenia", "Yusuf", "Zelda", "Anton", "Beatrix", "Cyrus", "Delia",
    "Emil", "Fiona", "Gideon", "Hana", "Ivo", "Juno", "Kasper", "Leona", "Matteo", "Nadia",
    "Otis", "Priya", "Rafael", "Selma", "Tobias", "Uma", "Viktor", "Willa", "Yara", "Zane",
    "Amara", "Basil", "Clio", "Desmond", "Elsa", "Florian", "Gwen", "Henrik", "Isla", "Jasper",
)  # fmt: skip
"""Names for the two speakers, their partners and relatives (no repeats inside a conversation)."""

PET_NAMES = (
    "Biscuit", "Pepper", "Mochi", "Noodle", "Pickles", "Waffles", "Juniper", "Marble", "Pretzel", "Clover",
    "Tofu", "Ziggy", "Sprout", "Nacho", "Olive", "Button", "Comet", "Dumpling", "Fennel", "Gizmo",
)  # fmt: skip
PET_SPECIES = ("dog", "cat", "rabbit", "parrot", "tortoise", "hamster")
CITIES = (
    "Lisbon", "Denver", "Osaka", "Tallinn", "Porto", "Halifax", "Adelaide", "Valencia", "Bergen", "Quebec City",
    "Ljubljana", "Tucson", "Galway", "Kraków", "Wellington", "Savannah", "Bologna", "Reykjavik", "Ghent", "Austin",
    "Cork", "Lyon", "Seville", "Utrecht", "Boise", "Tampere", "Graz", "Asheville", "Dunedin", "Malmö",
)  # fmt: skip
EMPLOYERS = (
    "Bluefin Analytics", "Cedar Health", "Harbor Logistics", "Nimbus Robotics", "Larkspur Media", "Quarry Bank",
    "Tidewater Energy", "Orchard Software", "Copperleaf Foods", "Summit Airlines", "Meridian Labs", "Pinecrest School",
    "Redwood Architects", "Silverline Insurance", "Foxglove Games", "Granite Hospital", "Kestrel Consulting",
    "Lumen Studios", "Northwind Shipping", "Aurora Pharmacy", "Beacon Library", "Willow Bakery", "Ironbridge Motors",
    "Saffron Hotels",
)  # fmt: skip
ROLES = (
    "nurse", "data analyst", "pastry chef", "civil engineer", "librarian", "pilot", "graphic designer",
    "pharmacist", "physics teacher", "carpenter", "veterinarian", "accountant", "software developer",
    "paramedic", "architect", "journalist", "marine biologist", "sound engineer", "translator", "electrician",
)  # fmt: skip
RELATIONS = ("sister", "brother", "cousin", "best friend", "aunt", "uncle", "roommate", "old college friend")
SHARED_HOBBIES = (
    "rock climbing", "pottery", "birdwatching", "salsa dancing", "woodworking", "sourdough baking",
    "chess", "kayaking", "urban sketching", "beekeeping", "archery", "calligraphy",
)  # fmt: skip
INSTRUMENTS = ("cello", "ukulele", "saxophone", "banjo", "harp", "trumpet", "accordion", "drums")

PREFERENCES: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    # kind: (values, statement templates, question templates)
    "cuisine": (
        ("Thai food", "Ethiopian food", "Georgian food", "Peruvian food", "Korean food", "Lebanese food"),
        (
            "Honestly nothing beats {value} for me, it's my favourite.",
            "If I could only eat one thing forever it'd be {value}.",
        ),
        ("What kind of food does {name} like best?", "Which cuisine is {name}'s favourite?"),
    ),
    "music": (
        ("jazz", "bluegrass", "synthwave", "flamenco", "bossa nova", "post-punk"),
        (
            "I've had {value} on repeat all week, it's my favourite kind of music.",
            "{value} is the only music I can work to.",
        ),
        ("What kind of music does {name} like most?", "Which music genre does {name} prefer?"),
    ),
    "drink": (
        ("oolong tea", "cold brew coffee", "ginger beer", "hot chocolate", "matcha latte", "fresh lemonade"),
        ("My go-to drink is {value}, every single day.", "I can't start a morning without {value}."),
        ("What is {name}'s go-to drink?", "Which drink does {name} have every day?"),
    ),
    "season": (
        ("autumn", "winter", "spring", "summer"),
        ("{value} is my favourite season, no contest.", "I always feel happiest in {value}."),
        ("Which season does {name} like best?", "What is {name}'s favourite season?"),
    ),
    "genre": (
        ("detective novels", "science fiction", "travel memoirs", "historical fiction", "poetry collections"),
        ("I mostly read {value}, I can't get enough of them.", "My bookshelf is basically all {value}."),
        ("What does {name} mostly like to read?", "Which kind of books does {name} prefer?"),
    ),
}
"""Preference kinds: (values, statement templates, question templates); `{value}`, `{name}` fields."""

EVENTS = (
    # (statement fragment, question fragment, label used in ordering questions: its words are in the statement)
    ("ran my first half marathon", "run a half marathon", "the half marathon"),
    ("went to a pottery workshop downtown", "go to a pottery workshop", "the pottery workshop"),
    ("attended my cousin's wedding", "attend a cousin's wedding", "the cousin's wedding"),
    ("did a volunteering shift at the food bank", "volunteer at the food bank", "the food bank shift"),
    ("gave a talk at a local meetup", "give a talk at a meetup", "the meetup talk"),
    ("went on a camping trip by the lake", "go camping by the lake", "the camping trip"),
    ("passed my driving test", "pass a driving test", "the driving test"),
    ("hosted a board game night", "host a board game night", "the board game night"),
    ("saw a comedy show at the old theatre", "see a comedy show", "the comedy show"),
    ("planted a vegetable garden", "plant a vegetable garden", "the vegetable garden"),
    ("took a cooking class", "take a cooking class", "the cooking class"),
    ("went to a concert in the park", "go to a concert in the park", "the park concert"),
)
EVENT_STATEMENTS = (
    "On {weekday}, {day}, I {event}!",
    "Big news from {day}: I {event}.",
    "So on {weekday} {day} I finally {event}.",
)
EVENT_QUESTIONS = ("When did {name} {event}?",)
ORDER_QUESTIONS = ("Which came first for {name}: {first} or {second}?",)

JOB_INITIAL = (
    "I work as {a_role} at {employer} these days.",
    "Work is busy, being {a_role} at {employer} keeps me on my toes.",
)
JOB_CHANGE = (
    "Big change: I just started a new job as {a_role} at {employer}!",
    "I left my old job, I'm now {a_role} at {employer}.",
)
JOB_NOW_QUESTIONS = ("Where does {name} work now?", "Which company is {name} working for at the moment?")
JOB_ROLE_QUESTIONS = ("What is {name}'s current job?",)
JOB_BEFORE_QUESTIONS = ("Where did {name} work before joining {employer}?",)
JOB_STATIC_QUESTIONS = ("Where does {name} work?",)

CITY_INITIAL = ("I've lived in {city} for a few years now.", "Life in {city} is treating me well.")
CITY_CHANGE = ("We finally finished the move, I live in {city} now!", "I packed everything up and moved to {city}.")
CITY_NOW_QUESTIONS = ("Which city does {name} live in now?",)
CITY_BEFORE_QUESTIONS = ("Where did {name} live before moving to {city}?",)
CITY_STATIC_QUESTIONS = ("Which city does {name} live in?",)

PARTNER_INITIAL = ("My partner {partner} is cooking dinner tonight.", "I've been dating {partner} for a while now.")
PARTNER_CHANGE = (
    "{old} and I broke up a while ago. I'm seeing someone new, {partner}.",
    "Things ended with {old}, but I've met {partner} and we're together now.",
)
PARTNER_NOW_QUESTIONS = ("Who is {name}'s partner now?",)
PARTNER_BEFORE_QUESTIONS = ("Who was {name} dating before {partner}?",)
PARTNER_STATIC_QUESTIONS = ("Who is {name}'s partner?",)

PET_STATEMENTS = (
    "We adopted a {species} named {pet}!",
    "Meet {pet}, my new {species}, the sweetest thing.",
)
PET_QUESTIONS = ("What is the name of {name}'s {species}?",)
PET_CAPTIONS = ("a photo of a {species} curled up on a blanket", "a photo of a {species} sitting by a window")

INSTRUMENT_STATEMENTS = ("I signed up for {instrument} lessons, my neighbours are suffering.",)
INSTRUMENT_QUESTIONS = ("Which instrument is {name} learning?",)

RELATIVE_INTROS = (
    "My {relation} {relative} came over for lunch, it was lovely.",
    "Spent the evening on the phone with my {relation} {relative}.",
)
RELATIVE_FOLLOWUPS: dict[str, tuple[str, str]] = {
    # kind: (statement template, question template); answer field named in parentheses below
    "city": (
        "{relative} just moved to {city}, I'm going to miss having them close.",
        "Which city did {name}'s {relation} move to?",
    ),
    "job": ("{relative} got a job as {a_role}, I'm so proud.", "What job did {name}'s {relation} get?"),
    "pet": (
        "{relative} adopted a {species} called {pet} last week.",
        "What is the name of the pet {name}'s {relation} adopted?",
    ),
}

HOBBY_FIRST = ("I've taken up {hobby}, it clears my head.",)
HOBBY_SECOND = ("Guess what, I joined a local {hobby} group too.", "I tried {hobby} for the first time and loved it.")
HOBBY_QUESTIONS = ("Which hobby have both {first} and {second} taken up?",)

DISTRACTORS = (
    "My coworker keeps talking about moving to {city}.",
    "I saw an ad for {a_role} job at {employer}, not for me though.",
    "My neighbour's {species} is called {pet}, it's always up to something.",
    "A friend of a friend works at {employer}, small world.",
    "I read an article about {city} on the train.",
)
"""Near-miss turns: they mention pool values that answer no question."""

REPLIES: dict[str, tuple[str, ...]] = {
    "job": ("Sounds like a good place to be.", "Do you like the people there?", "That suits you."),
    "job-change": (
        "Congrats, that sounds like a great fit!",
        "Wow, how are you finding it so far?",
        "That's a big step!",
    ),
    "city": ("Oh nice, I've heard it's lovely there.", "I really need to visit sometime."),
    "city-change": ("Moving is exhausting, hope you're settling in.", "A fresh start, how exciting!"),
    "partner": ("Aww, that's sweet.", "You two sound great together."),
    "partner-change": ("That's a lot of change, how are you feeling?", "Aww, happy for you."),
    "pet": ("So cute! Send more pictures.", "Aww, I love that name."),
    "preference": ("Ha, I can totally see that.", "Good taste, honestly.", "I'll have to try that sometime."),
    "event": ("That sounds amazing!", "Wow, how did it go?", "I'm so glad you did that."),
    "instrument": ("Ha, poor neighbours! Have fun with it.", "That's brave, I'd love to hear you play."),
    "relative": ("That's so nice to hear.", "Tell them I said hi!", "Oh wow, good for them."),
    "hobby": ("No way, that's great!", "We should go together sometime."),
    "distractor": ("Huh, interesting.", "Ha, small world.", "Oh really?"),
}
"""What the other speaker answers after a statement, by statement kind."""

GREETINGS = (
    ("Hey {other}! How have you been?", "Hi {other}! Pretty good, busy week."),
    ("Hi {other}, got a minute to chat?", "Always! What's new?"),
    ("Morning {other}! Long time no talk.", "I know, right? So much has happened."),
    ("{other}! Hope your week is going well.", "Hey! It's been a ride, but good."),
)
SMALL_TALK = (
    ("The weather has been so grey lately.", "Same here, I keep forgetting what the sun looks like."),
    ("I binge-watched a whole baking show last night.", "Ha, those shows always make me hungry."),
    ("Did you ever finish that puzzle you started?", "Almost, the sky part is impossible."),
    ("My phone screen cracked again.", "Oh no, you need a better case!"),
    ("I've been trying to drink more water.", "Good idea, I always forget."),
    ("Traffic was terrible this morning.", "Ugh, rush hour is the worst."),
    ("I finally cleaned out my closet.", "That feels so good when it's done."),
    ("Have you watched anything good lately?", "Nothing new, mostly rewatching old comedies."),
    ("I made soup with whatever was in the fridge.", "Those random soups are always the best."),
    ("My plants are actually alive for once.", "Ha, that's an achievement!"),
    ("I tried to wake up early all week.", "How did that go?"),
    ("The new café near me has great pastries.", "Now I'm jealous."),
    ("I reorganised my whole bookshelf by colour.", "Ha, does it make anything easier to find?"),
    ("My neighbour has been drilling all morning.", "Oof, noise-cancelling headphones time."),
    ("I burnt the toast twice today.", "Some days are like that."),
    ("Do you have any plans for the weekend?", "Not really, maybe a long walk."),
    ("I found an old photo album in a drawer.", "Those are the best finds."),
    ("The bus was early for once.", "A rare miracle!"),
    ("I'm trying to cut down on screen time.", "Let me know if you find a trick that works."),
    ("It rained right after I washed the windows.", "Classic, that always happens."),
)
CLOSINGS = (
    ("Anyway, I should get going. Talk soon!", "Bye! Take care."),
    ("Okay, dinner time for me. Catch you later!", "Enjoy! Talk later."),
    ("I need to run, but this was nice.", "Same, chat soon!"),
)
